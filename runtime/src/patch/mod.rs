//! Pure patch functions, one per hole encoding (in progress).
