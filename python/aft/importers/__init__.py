"""Other implementations' checkpoints as aft model files: `checkpoint` holds the mapping machinery
(a table per implementation, checked key by key), `labml` the table of labml.ai's annotated AFT,
`rwkv4` RWKV-4's (BlinkDL's state_dicts, and rwkv.cpp's files read by `rwkv_cpp_file`)."""
