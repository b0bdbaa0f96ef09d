"""A cache of paid responses across runs (opt-in: `cache = true`): a call already answered for
the same model, settings, messages and sample is not paid again."""
