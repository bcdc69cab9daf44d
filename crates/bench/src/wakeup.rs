//! The wakeup study (not built yet).

use std::io;

use crate::study::{Section, StudyOpts};

/// Run the wakeup study for `ringkit compare`.
pub fn study(_opts: &StudyOpts, _progress: &mut dyn FnMut(&str)) -> io::Result<Section> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "the wakeup study is not built yet",
    ))
}
