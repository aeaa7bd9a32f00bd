// CairnDaemon
public enum CairnDaemonModule {}
