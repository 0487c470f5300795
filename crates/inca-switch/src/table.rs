//! Match-action tables: exact, ternary, longest-prefix and range match.

/// How a table matches its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatchKind {
    /// The whole key must equal the entry's key (SRAM, hashed).
    Exact,
    /// Value/mask with a priority (TCAM).
    Ternary,
    /// Longest prefix of the key, in bits from its first byte (TCAM).
    Lpm,
    /// The key, read as a big-endian unsigned number, within `lo..=hi` (TCAM
    /// with range match units).
    Range,
}
