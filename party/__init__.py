"""The data-owner process: private column block, masks, decoding, and its gRPC service."""
