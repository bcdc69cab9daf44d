//! ringkit runtime.
