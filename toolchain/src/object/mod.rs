//! Object-file readers (in progress).
