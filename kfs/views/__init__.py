"""What users read, built on the storage layer: JSON lines, values, partition summaries."""
