"""The composition root: the one place the service is assembled from its features."""
