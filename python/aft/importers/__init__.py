"""Other implementations' checkpoints as aft model files: `checkpoint` holds the mapping machinery
(a table per implementation, checked key by key), `labml` the table of labml.ai's annotated AFT."""
