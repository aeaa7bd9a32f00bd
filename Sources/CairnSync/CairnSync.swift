// CairnSync
public enum CairnSyncModule {}
