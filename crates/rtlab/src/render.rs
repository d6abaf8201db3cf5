//! Terminal rendering of Run records: summary tables and warnings. Only the binary prints.
