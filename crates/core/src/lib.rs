//! Switchboard's pure core.
#![forbid(unsafe_code)]

pub mod diag;
pub mod function;
pub mod template;
pub mod context;
pub mod error;
pub mod limits;
pub mod params;
pub(crate) mod reader;
pub mod builder;
pub mod transfer;
