//! nearflash workloads: real request streams against an emulated device.
//!
//! - [`trace`]: block traces (MQSim, MSR Cambridge, fio iolog, blkparse, nbdkit's log) read as request streams,
//!   and written back in any of those formats;
//! - [`flows`]: concurrent flows, each on its own submission queue (a trace replayed open or closed loop, or a
//!   synthetic fio-like job), with MQSim's per-flow figures, and slowdown and fairness from runs alone;
//! - [`serve`]: the device shared by concurrent requests of unmodified clients (the NBD export), paced as fast as
//!   the simulator runs or in real time.

pub mod trace;
pub mod flows;
pub mod serve;
