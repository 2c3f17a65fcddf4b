"""The Spark store kind: tables or queries on a Spark Connect server, Spark SQL pushed down."""
