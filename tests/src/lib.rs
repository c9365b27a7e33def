//! Integration tests live in api/.
