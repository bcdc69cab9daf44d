//! `ringkit torture`: chaos load with every byte verified (not built yet).
