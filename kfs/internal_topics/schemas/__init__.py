"""Kafka message schemas as data, one module per Kafka source directory."""
