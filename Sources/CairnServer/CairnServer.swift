// CairnServer
public enum CairnServerModule {}
