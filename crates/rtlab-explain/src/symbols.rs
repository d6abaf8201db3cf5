//! Kernel symbol lookup from `/proc/kallsyms` text, for naming timer callbacks, work functions
//! and sampled kernel stacks.
//!
//! Trace events carry function pointers; a bare address means nothing to a user, `tick_nohz_handler`
//! does. The table is parsed once and searched by binary search.

/// Text symbols sorted by address.
#[derive(Clone, Debug, Default)]
pub struct KernelSymbols {
    symbols: Vec<(u64, Box<str>)>,
}

impl KernelSymbols {
    /// Parses kallsyms lines (`ffffffff81000000 T _stext [module]`). Lines that are not symbols,
    /// data symbols, and all-zero addresses (kptr_restrict hides them) are skipped.
    pub fn parse(text: &str) -> KernelSymbols {
        let mut symbols: Vec<(u64, Box<str>)> = text
            .lines()
            .filter_map(|line| {
                let mut parts = line.split_whitespace();
                let address = u64::from_str_radix(parts.next()?, 16).ok()?;
                let kind = parts.next()?;
                let name = parts.next()?;
                let is_text = matches!(kind, "t" | "T" | "w" | "W");
                (address != 0 && is_text).then(|| (address, Box::from(name)))
            })
            .collect();
        symbols.sort_by_key(|(address, _)| *address);
        KernelSymbols { symbols }
    }

    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }

    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    /// The symbol containing `address` (the nearest one at or below it).
    pub fn lookup(&self, address: u64) -> Option<&str> {
        let index = self.symbols.partition_point(|(start, _)| *start <= address);
        let (_, name) = self.symbols.get(index.checked_sub(1)?)?;
        Some(name)
    }

    /// The symbol name, or the address in hex when it cannot be resolved.
    pub fn name(&self, address: u64) -> String {
        match self.lookup(address) {
            Some(name) => name.to_owned(),
            None => format!("{address:#x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_enclosing_symbol() {
        let symbols = KernelSymbols::parse(
            "ffffffff81000100 T tick_nohz_handler\nffffffff81000000 T _stext\n0000000000000000 T hidden\nffffffff82000000 D some_data\nbad line\nffffffff81000200 t hrtimer_wakeup\t[kvm]\n",
        );
        assert_eq!(symbols.len(), 3);
        assert_eq!(
            symbols.lookup(0xffffffff81000150),
            Some("tick_nohz_handler")
        );
        assert_eq!(symbols.lookup(0xffffffff81000200), Some("hrtimer_wakeup"));
        assert_eq!(symbols.lookup(0x10), None);
        assert_eq!(symbols.name(0x10), "0x10");
    }
}
