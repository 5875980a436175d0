//! Placeholder being replaced by the balanced, sticky uniform assignor (work in progress).

use super::{Assignment, Assignor, GroupSpec};

#[derive(Debug, Clone, Copy, Default)]
pub struct UniformAssignor;

impl Assignor for UniformAssignor {
    fn name(&self) -> &'static str {
        "uniform"
    }

    fn assign(&self, spec: &GroupSpec) -> Assignment {
        super::roundrobin::RoundRobinAssignor.assign(spec)
    }
}
