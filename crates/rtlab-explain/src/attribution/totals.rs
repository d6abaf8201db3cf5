//! Time summed by cause (kind, name, pid): a late wake-up's causes here, and the parts of a
//! workload thread's explained window in rtlab-workload. Both are `rtlab_core::Cause<K>`, each
//! with its own kinds, summed and ordered the same way.

use rtlab_core::Cause;
use std::collections::BTreeMap;

/// What causes are summed by: kind, name and pid.
type CauseKey<K> = (K, String, Option<u32>);

/// Nanoseconds summed by cause (kind, name, pid), each with the detail it was first given.
#[derive(Clone, Debug)]
pub struct CauseTotals<K> {
    totals: BTreeMap<CauseKey<K>, (u64, Option<String>)>,
}

impl<K> Default for CauseTotals<K> {
    fn default() -> Self {
        CauseTotals {
            totals: BTreeMap::new(),
        }
    }
}

impl<K: Ord> CauseTotals<K> {
    /// Adds `ns` to a cause; `detail` is kept only when the cause is new.
    pub fn add(
        &mut self,
        kind: K,
        name: String,
        pid: Option<u32>,
        detail: Option<String>,
        ns: u64,
    ) {
        let entry = self.totals.entry((kind, name, pid)).or_insert((0, detail));
        entry.0 += ns;
    }

    /// The causes, in (kind, name, pid) order.
    pub fn into_causes(self) -> Vec<Cause<K>> {
        self.totals
            .into_iter()
            .map(|((kind, name, pid), (ns, detail))| Cause {
                kind,
                name,
                pid,
                ns,
                detail,
            })
            .collect()
    }
}

/// Largest first; equal times by kind, then in the order given (the sort is stable).
pub fn sort_largest_first<K: Ord>(causes: &mut [Cause<K>]) {
    causes.sort_by(|left, right| right.ns.cmp(&left.ns).then(left.kind.cmp(&right.kind)));
}
