"""Text processing: raw component strings -> normalised token lists and a vocabulary."""
