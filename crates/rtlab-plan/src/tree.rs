//! One CPU's scheduling plan as a residue tree: the data structure behind incremental admission.
//!
//! Every period on a CPU is `leaf_length · 2^d` for a depth `d` (the CPU's shortest period is depth 0,
//! its *leaf* window). The major cycle holds `2^D` leaf windows. A node at depth `d` stands for the
//! leaf windows whose index is congruent to its `residue` modulo `2^d`; each window of the node's
//! period contains exactly one such leaf, so time placed in a node is the same in every period of that
//! depth: the layout repeats with the reservation's period by construction.
//!
//! Inside a leaf window the blocks of the nodes on the leaf's root path follow one another (the root's
//! block first). A node's block is its `extent` long and holds its pieces at fixed offsets, so a block
//! starts at the sum of its ancestors' extents, which is the same in every leaf under the node. A leaf
//! window overflows when the extents along its path exceed `leaf_length`; the tree keeps, for every
//! node, the largest path sum below it (`tails[0]`) and, for every deeper depth `d`, the smallest path
//! sum that reaches a node at depth `d` (`tails[d - depth]`). So the node at depth `d` with the most
//! free time is found by one descent, and an update touches one root path: admission costs
//! O(D²) for a tree of depth D, independent of how many reservations the CPU holds.
//!
//! Rebuilding places every reservation again, shortest period first, splitting a reservation over
//! several nodes of its depth when no single node has room. With no gaps, the free time left at depth
//! `d`, summed over its nodes, is exactly `2^d · leaf_length · (1 − U_{<d})`, so a rebuild succeeds for
//! every set whose utilisation is at most 1: the admission test is the utilisation test.

use std::collections::BTreeMap;

/// Where one piece of a reservation lives: the node and its offset inside the node's block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PieceRef {
    pub node: u32,
    pub offset: u64,
}

#[derive(Clone, Debug)]
struct Piece {
    length: u64,
    grant: u64,
}

#[derive(Clone, Debug)]
struct Node {
    depth: u32,
    residue: u64,
    parent: Option<u32>,
    children: [Option<u32>; 2],
    /// Pieces by offset inside this node's block; gaps left by releases stay until a rebuild.
    pieces: BTreeMap<u64, Piece>,
    /// Length of this node's block in every leaf window under it.
    extent: u64,
    /// `tails[0]`: the largest sum of extents from this node down to a leaf. `tails[j]` for `j ≥ 1`:
    /// the smallest sum, over nodes `u` at depth `depth + j` below, of the extents on the path from
    /// this node down to `u`'s parent plus `u`'s `tails[0]`. Absent children count as 0.
    tails: Vec<u64>,
}

/// One CPU's plan. `base_level` is the quantum exponent of the leaf window.
#[derive(Clone, Debug)]
pub struct CpuTree {
    pub base_level: u32,
    pub depth: u32,
    pub leaf_length: u64,
    nodes: Vec<Node>,
}

/// The pieces one grant received in a rebuild.
pub type Placed = (u64, Vec<PieceRef>);

/// A slot of one major cycle: start offset, length and the grant it belongs to.
pub type TreeSlot = (u64, u64, u64);

impl CpuTree {
    pub fn new(quantum: u64, base_level: u32, depth: u32) -> CpuTree {
        let root = Node {
            depth: 0,
            residue: 0,
            parent: None,
            children: [None, None],
            pieces: BTreeMap::new(),
            extent: 0,
            tails: vec![0; depth as usize + 1],
        };
        CpuTree {
            base_level,
            depth,
            leaf_length: quantum << base_level,
            nodes: vec![root],
        }
    }

    /// Length of the major cycle: the longest period the tree can hold.
    pub fn cycle(&self) -> u64 {
        self.leaf_length << self.depth
    }

    fn tail(&self, node: Option<u32>, depth: u32) -> u64 {
        match node {
            None => 0,
            Some(index) => {
                let node = &self.nodes[index as usize];
                node.tails[(depth - node.depth) as usize]
            }
        }
    }

    fn recompute(&mut self, index: u32) {
        let node = &self.nodes[index as usize];
        let (node_depth, extent, children) = (node.depth, node.extent, node.children);
        let length = (self.depth - node_depth) as usize + 1;
        let mut tails = std::mem::take(&mut self.nodes[index as usize].tails);
        tails.resize(length, 0);
        let child_depth = node_depth + 1;
        tails[0] = extent
            + if node_depth < self.depth {
                self.tail(children[0], child_depth)
                    .max(self.tail(children[1], child_depth))
            } else {
                0
            };
        for (offset, slot) in tails.iter_mut().enumerate().skip(1) {
            let depth = node_depth + offset as u32;
            *slot = extent
                + self
                    .tail(children[0], depth)
                    .min(self.tail(children[1], depth));
        }
        self.nodes[index as usize].tails = tails;
    }

    fn propagate(&mut self, index: u32) {
        let mut current = Some(index);
        while let Some(index) = current {
            self.recompute(index);
            current = self.nodes[index as usize].parent;
        }
    }

    /// Deepens the tree so it can hold periods up to `leaf_length · 2^depth`. Existing pieces keep
    /// their times: the cycle only repeats.
    pub fn ensure_depth(&mut self, depth: u32) {
        if depth <= self.depth {
            return;
        }
        self.depth = depth;
        // Children are always pushed after their parent, so reverse order visits children first.
        for index in (0..self.nodes.len() as u32).rev() {
            self.recompute(index);
        }
    }

    /// The most free time any single node at `depth` offers.
    pub fn max_slack(&self, depth: u32) -> u64 {
        self.leaf_length
            .saturating_sub(self.nodes[0].tails[depth as usize])
    }

    fn child_or_create(&mut self, index: u32, which: usize) -> u32 {
        if let Some(child) = self.nodes[index as usize].children[which] {
            return child;
        }
        let parent = &self.nodes[index as usize];
        let depth = parent.depth + 1;
        let residue = parent.residue + ((which as u64) << parent.depth);
        let child = Node {
            depth,
            residue,
            parent: Some(index),
            children: [None, None],
            pieces: BTreeMap::new(),
            extent: 0,
            tails: vec![0; (self.depth - depth) as usize + 1],
        };
        let child_index = self.nodes.len() as u32;
        self.nodes.push(child);
        self.nodes[index as usize].children[which] = Some(child_index);
        child_index
    }

    fn append(&mut self, index: u32, length: u64, grant: u64) -> PieceRef {
        let node = &mut self.nodes[index as usize];
        let offset = node.extent;
        node.pieces.insert(offset, Piece { length, grant });
        node.extent += length;
        self.propagate(index);
        PieceRef {
            node: index,
            offset,
        }
    }

    /// Places `length` in the single node at `depth` with the most room, if it has enough.
    pub fn place_single(&mut self, depth: u32, length: u64, grant: u64) -> Option<PieceRef> {
        if depth > self.depth || self.max_slack(depth) < length {
            return None;
        }
        let mut index = 0u32;
        while self.nodes[index as usize].depth < depth {
            let children = self.nodes[index as usize].children;
            let which = usize::from(self.tail(children[1], depth) < self.tail(children[0], depth));
            index = self.child_or_create(index, which);
        }
        Some(self.append(index, length, grant))
    }

    /// Places `length` split over as many nodes at `depth` as it takes, or changes nothing and returns
    /// `None` when their free time together is not enough.
    pub fn place_split(&mut self, depth: u32, length: u64, grant: u64) -> Option<Vec<PieceRef>> {
        if depth > self.depth {
            return None;
        }
        let mut targets = Vec::new();
        let mut remaining = length;
        self.collect_room(0, 0, depth, &mut remaining, &mut targets);
        if remaining > 0 {
            return None;
        }
        let pieces = targets
            .into_iter()
            .map(|(residue, take)| {
                let mut index = 0u32;
                while self.nodes[index as usize].depth < depth {
                    let node_depth = self.nodes[index as usize].depth;
                    let which = ((residue >> node_depth) & 1) as usize;
                    index = self.child_or_create(index, which);
                }
                self.append(index, take, grant)
            })
            .collect();
        Some(pieces)
    }

    /// Depth-first search for free time at `depth` (recursion depth is bounded by the tree depth,
    /// at most [`crate::rounding::MAX_LEVEL`]).
    fn collect_room(
        &self,
        index: u32,
        above: u64,
        depth: u32,
        remaining: &mut u64,
        targets: &mut Vec<(u64, u64)>,
    ) {
        let node = &self.nodes[index as usize];
        if node.depth == depth {
            let slack = self.leaf_length.saturating_sub(above + node.tails[0]);
            let take = slack.min(*remaining);
            if take > 0 {
                targets.push((node.residue, take));
                *remaining -= take;
            }
            return;
        }
        if self.leaf_length <= above + node.tails[(depth - node.depth) as usize] {
            return;
        }
        let below = above + node.extent;
        let mut order = [0usize, 1];
        if self.tail(node.children[1], depth) < self.tail(node.children[0], depth) {
            order = [1, 0];
        }
        for which in order {
            if *remaining == 0 {
                return;
            }
            match node.children[which] {
                Some(child) => self.collect_room(child, below, depth, remaining, targets),
                None => {
                    let slack = self.leaf_length.saturating_sub(below);
                    if slack == 0 {
                        continue;
                    }
                    let child_residue = node.residue + ((which as u64) << node.depth);
                    let count = 1u64 << (depth - node.depth - 1);
                    let mut taken = 0u64;
                    while *remaining > 0 && taken < count {
                        let take = slack.min(*remaining);
                        targets.push((child_residue + (taken << (node.depth + 1)), take));
                        *remaining -= take;
                        taken += 1;
                    }
                }
            }
        }
    }

    /// Removes a piece. With `shrink`, a node whose last piece goes away gives its trailing gap back
    /// (blocks of deeper nodes move earlier); without it, the gap stays until the next rebuild.
    pub fn remove(&mut self, piece: PieceRef, shrink: bool) {
        let node = &mut self.nodes[piece.node as usize];
        node.pieces.remove(&piece.offset);
        if shrink {
            let new_extent = node
                .pieces
                .iter()
                .next_back()
                .map_or(0, |(offset, piece)| offset + piece.length);
            if new_extent != node.extent {
                node.extent = new_extent;
                self.propagate(piece.node);
            }
        }
    }

    fn ancestors_extent(&self, index: u32) -> u64 {
        let mut total = 0;
        let mut current = self.nodes[index as usize].parent;
        while let Some(parent) = current {
            total += self.nodes[parent as usize].extent;
            current = self.nodes[parent as usize].parent;
        }
        total
    }

    /// Where a piece falls inside one window of its own period: `(offset, length)`.
    pub fn piece_in_period(&self, piece: PieceRef) -> (u64, u64) {
        let node = &self.nodes[piece.node as usize];
        let length = node
            .pieces
            .get(&piece.offset)
            .map_or(0, |piece| piece.length);
        let offset =
            node.residue * self.leaf_length + self.ancestors_extent(piece.node) + piece.offset;
        (offset, length)
    }

    /// The grant holding time `offset` of the major cycle, if any.
    pub fn grant_at(&self, offset: u64) -> Option<u64> {
        let offset = offset % self.cycle();
        let leaf = offset / self.leaf_length;
        let inside = offset % self.leaf_length;
        let mut index = 0u32;
        let mut start = 0u64;
        loop {
            let node = &self.nodes[index as usize];
            if inside < start + node.extent {
                let relative = inside - start;
                return node
                    .pieces
                    .range(..=relative)
                    .next_back()
                    .filter(|(piece_offset, piece)| *piece_offset + piece.length > relative)
                    .map(|(_, piece)| piece.grant);
            }
            start += node.extent;
            if node.depth == self.depth {
                return None;
            }
            index = node.children[((leaf >> node.depth) & 1) as usize]?;
        }
    }

    /// Every slot of one major cycle in time order, adjacent pieces of one grant merged.
    pub fn slots(&self) -> Vec<TreeSlot> {
        let mut slots: Vec<TreeSlot> = Vec::new();
        for leaf in 0..(1u64 << self.depth) {
            let leaf_start = leaf * self.leaf_length;
            let mut index = Some(0u32);
            let mut start = leaf_start;
            while let Some(current) = index {
                let node = &self.nodes[current as usize];
                for (offset, piece) in &node.pieces {
                    let slot_start = start + offset;
                    match slots.last_mut() {
                        Some(last) if last.2 == piece.grant && last.0 + last.1 == slot_start => {
                            last.1 += piece.length;
                        }
                        _ => slots.push((slot_start, piece.length, piece.grant)),
                    }
                }
                start += node.extent;
                index = if node.depth == self.depth {
                    None
                } else {
                    node.children[((leaf >> node.depth) & 1) as usize]
                };
            }
        }
        slots
    }

    /// Places every `(grant, depth, amount)` afresh, shortest period first. `None` only when the set's
    /// utilisation exceeds 1 (see the module docs).
    pub fn rebuild(
        quantum: u64,
        base_level: u32,
        depth: u32,
        entries: &mut [(u64, u32, u64)],
    ) -> Option<(CpuTree, Vec<Placed>)> {
        let mut tree = CpuTree::new(quantum, base_level, depth);
        entries.sort_by(|left, right| {
            left.1
                .cmp(&right.1)
                .then(right.2.cmp(&left.2))
                .then(left.0.cmp(&right.0))
        });
        let mut placed = Vec::with_capacity(entries.len());
        for &(grant, entry_depth, amount) in entries.iter() {
            let pieces = match tree.place_single(entry_depth, amount, grant) {
                Some(piece) => vec![piece],
                None => tree.place_split(entry_depth, amount, grant)?,
            };
            placed.push((grant, pieces));
        }
        Some((tree, placed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_level_fills_the_leaf_in_order() {
        let mut tree = CpuTree::new(10, 2, 0);
        assert_eq!(tree.leaf_length, 40);
        assert!(tree.place_single(0, 15, 1).is_some());
        assert!(tree.place_single(0, 25, 2).is_some());
        assert_eq!(tree.place_single(0, 1, 3), None);
        assert_eq!(tree.slots(), vec![(0, 15, 1), (15, 25, 2)]);
    }

    #[test]
    fn deeper_levels_use_alternate_leaves_and_repeat_with_their_period() {
        let mut tree = CpuTree::new(10, 0, 1);
        tree.place_single(0, 4, 1).unwrap();
        tree.place_single(1, 5, 2).unwrap();
        tree.place_single(1, 6, 3).unwrap();
        // Grant 2 went to one leaf, grant 3 to the other (each had 6 free in either leaf).
        let slots = tree.slots();
        assert_eq!(slots.len(), 4);
        assert_eq!(tree.grant_at(0), Some(1));
        assert_eq!(tree.grant_at(10), Some(1));
        assert_eq!(tree.max_slack(1), 1);
    }

    #[test]
    fn split_uses_the_room_of_several_nodes() {
        let mut tree = CpuTree::new(10, 0, 1);
        tree.place_single(0, 4, 1).unwrap();
        // 6 free in each of two leaves: 9 needs both.
        assert_eq!(tree.place_single(1, 9, 2), None);
        let pieces = tree.place_split(1, 9, 2).expect("room in two leaves");
        assert_eq!(pieces.len(), 2);
        assert_eq!(tree.place_split(1, 4, 3), None);
    }

    #[test]
    fn rebuild_packs_a_full_set() {
        // Utilisation exactly 1: 5/10 + 5/20 + 10/40.
        let mut entries = vec![(1, 2, 10), (2, 0, 5), (3, 1, 5)];
        let (tree, placed) = CpuTree::rebuild(10, 0, 2, &mut entries).expect("fits");
        assert_eq!(placed.len(), 3);
        let busy: u64 = tree.slots().iter().map(|slot| slot.1).sum();
        assert_eq!(busy, tree.cycle());
    }
}
