//! The analytic model of "Active Disk Meets Flash" §4 exactly as written (see `/work/shared/notes/issd.md`):
//! pipelining performance (Eq. 1-2, stages (a)-(f)) in [`pipeline`], energy in [`energy`], partitioning and the
//! Fig. 7-10 studies in [`studies`], parameters with unit and source in [`params`], Fig. 7's configurations in
//! [`configs`]. Every free parameter the paper leaves open is a named, documented assumption in [`params`].

pub mod configs;
pub mod energy;
pub mod params;
pub mod pipeline;
pub mod studies;

pub use configs::{fig7, system, Fig7Config};
pub use energy::{energy, epb_terms, Component, Energy, EpbTerms};
pub use params::{profile, table1, EnergyParams, KernelProfile, StreamOps, Table1Row, PROFILES, TABLE1};
pub use pipeline::{bandwidth, evaluate, host_dram_rate, stages, Evaluation, Mode, Stages, SystemConfig};
pub use studies::{
    fig10_breakdown, fig7_sweep, fig8_iso, fig9_sweep, iso_channels, partition, Fig7Point, Fig9Point, IsoPoint,
    Partition,
};
