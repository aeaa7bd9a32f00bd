// CairnIndex: the SQLite index (FTS5 + vectors), hybrid ranking, applying deltas.
public enum CairnIndexModule {}
