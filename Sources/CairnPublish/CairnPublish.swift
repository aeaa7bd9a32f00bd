// CairnPublish: ingest, chunking, embedding cache, snapshot/delta building, signing, repository writer.
public enum CairnPublishModule {}
