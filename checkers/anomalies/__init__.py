"""The Spark checker's anomaly families (DataFrame API only) and the engine that runs them."""
