//! Delta debugging (Zeller and Hildebrandt's ddmin): the smallest sub-list of a failing request
//! list that still fails, found by trying halves, then complements, then finer pieces. Each try
//! is a replay against a fresh daemon and costs seconds, so the search stops after `budget` tries
//! with the smallest failing list found so far.

/// The result of a search: the smallest failing list found, and how many tries it took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shrunk<T> {
    pub items: Vec<T>,
    pub tries: usize,
    /// Whether the search ran out of tries before it was done (the list may shrink further).
    pub out_of_tries: bool,
}

/// `items` fails (`fails(items)` is true); returns a 1-minimal failing sub-list, or the smallest
/// found within `budget` tries and while `in_time()` holds (asked before each try). The order of
/// the items is kept.
pub fn ddmin<T: Clone>(
    items: &[T],
    mut fails: impl FnMut(&[T]) -> bool,
    budget: usize,
    in_time: impl Fn() -> bool,
) -> Shrunk<T> {
    let mut current = items.to_vec();
    let mut pieces = 2;
    let mut tries = 0;
    let mut try_it = |candidate: &[T], tries: &mut usize| {
        *tries += 1;
        fails(candidate)
    };
    while current.len() >= 2 {
        let size = current.len().div_ceil(pieces);
        let chunks: Vec<Vec<T>> = current.chunks(size).map(<[T]>::to_vec).collect();
        let mut reduced = false;
        for chunk in &chunks {
            if tries >= budget || !in_time() {
                return Shrunk {
                    items: current,
                    tries,
                    out_of_tries: true,
                };
            }
            if try_it(chunk, &mut tries) {
                current = chunk.clone();
                pieces = 2;
                reduced = true;
                break;
            }
        }
        if !reduced && chunks.len() > 2 {
            for skip in 0..chunks.len() {
                if tries >= budget || !in_time() {
                    return Shrunk {
                        items: current,
                        tries,
                        out_of_tries: true,
                    };
                }
                let complement: Vec<T> = chunks
                    .iter()
                    .enumerate()
                    .filter(|(index, _)| *index != skip)
                    .flat_map(|(_, chunk)| chunk.iter().cloned())
                    .collect();
                if try_it(&complement, &mut tries) {
                    current = complement;
                    pieces = (pieces - 1).max(2);
                    reduced = true;
                    break;
                }
            }
        }
        if !reduced {
            if pieces >= current.len() {
                break;
            }
            pieces = (pieces * 2).min(current.len());
        }
    }
    Shrunk {
        items: current,
        tries,
        out_of_tries: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_culprit_is_found_among_many() {
        let items: Vec<u32> = (0..1_000).collect();
        let shrunk = ddmin(&items, |list| list.contains(&637), 100, || true);
        assert_eq!(shrunk.items, vec![637]);
        assert!(!shrunk.out_of_tries);
        assert!(shrunk.tries <= 30, "{} tries", shrunk.tries);
    }

    #[test]
    fn a_pair_that_fails_only_together_is_kept_in_order() {
        let items: Vec<u32> = (0..200).collect();
        let shrunk = ddmin(
            &items,
            |list| list.contains(&13) && list.contains(&150),
            200,
            || true,
        );
        assert_eq!(shrunk.items, vec![13, 150]);
    }

    #[test]
    fn the_budget_bounds_the_tries() {
        let items: Vec<u32> = (0..1_000).collect();
        let shrunk = ddmin(
            &items,
            |list| list.contains(&1) && list.contains(&999),
            3,
            || true,
        );
        assert!(shrunk.out_of_tries);
        assert_eq!(shrunk.tries, 3);
        assert!(shrunk.items.contains(&1) && shrunk.items.contains(&999));
    }

    #[test]
    fn out_of_time_ends_the_search() {
        let items: Vec<u32> = (0..1_000).collect();
        let shrunk = ddmin(&items, |list| list.contains(&500), 100, || false);
        assert!(shrunk.out_of_tries);
        assert_eq!((shrunk.tries, shrunk.items.len()), (0, 1_000));
    }
}
