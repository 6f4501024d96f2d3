//! The groups' SQL functions (placeholder module filled below).
