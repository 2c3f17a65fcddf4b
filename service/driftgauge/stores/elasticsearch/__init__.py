"""The elasticsearch store kind: Elasticsearch 7.10 read through the opensearch adapter."""
