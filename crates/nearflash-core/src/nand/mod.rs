//! The NAND flash array: geometry and addresses, array and bus timing, and error correction.

mod array;
mod ecc;
mod geometry;

pub use array::{CmdKind, Command, NandArray, NandEv, NandOut, NandStats, NandTiming};
pub use ecc::{EccModel, EccOutcome};
pub use geometry::{Geometry, PageAddr};
