//! Owned stencils produced by the readers (in progress).
