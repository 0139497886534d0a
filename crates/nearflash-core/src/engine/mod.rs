//! Virtual time: a nanosecond clock, resource timelines, the energy ledger and seeded random streams.
//!
//! The engine is deliberately small. Commands are executed when they are submitted: each one walks the
//! resources it needs in order and reserves them on their timelines, which yields its completion time; the
//! device keeps completions in time order and the host observes them as its clock advances. Given the same
//! inputs and seed, every reservation and therefore every reported number is identical.

mod energy;
mod fasthash;
mod port;
mod resources;
mod rng;
mod timeline;

pub use energy::{EnergyAccount, EnergyLedger};
pub use fasthash::{IntHasher, IntMap};
pub use port::Port;
pub use resources::{GroupId, GroupUtilisation, ResourceId, Resources};
pub use rng::{rng_stream, Rng};
pub use timeline::Timeline;

/// Virtual time in nanoseconds since the device was opened.
pub type Time = u64;

/// Converts nanoseconds to seconds for reports.
pub fn ns_to_s(t: Time) -> f64 {
    t as f64 * 1e-9
}
