//! The NAND flash array: geometry and addresses, array and bus timing, and error correction.

mod array;
mod ecc;
mod geometry;

pub use array::{ChannelGrants, CmdKind, Command, NandArray, NandEv, NandOut, NandStats, NandTiming, CHANNEL_CLASSES};
pub use ecc::{EccModel, EccOutcome};
pub use geometry::{FastGeometry, Geometry, PageAddr};
