"""The system under test: a minimal Kafka-like replicated log (controller, brokers, client library)."""
