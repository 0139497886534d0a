//! Virtual time: a nanosecond clock, resource timelines, the energy ledger and seeded random streams.
//!
//! The engine is deliberately small: reservation timelines for resources that serve requests as they come (link,
//! cores, DRAM, compute units), an event queue for the device's event loop, and timing plans (`flow`): each
//! command's timing as a graph of steps whose ends (`At`) become known as the loop resolves them. Given the same
//! inputs and seed, every event and reservation and therefore every reported number is identical.

mod energy;
pub mod events;
pub mod flow;
mod fasthash;
mod port;
mod resources;
mod rng;
mod time;
mod timeline;

pub use energy::{EnergyAccount, EnergyLedger};
pub use events::{EventQueue, Schedule};
pub use flow::{At, Flow};
pub use fasthash::{IntHasher, IntMap};
pub use port::Port;
pub use resources::{GroupId, GroupUtilisation, ResourceId, Resources};
pub use rng::{rng_stream, Rng};
pub use time::Time;
pub use timeline::Timeline;

/// Converts nanoseconds to seconds for reports.
pub fn ns_to_s(ns: u64) -> f64 {
    ns as f64 * 1e-9
}
