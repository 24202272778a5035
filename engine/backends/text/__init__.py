"""The `tokenizer` and `detokenizer` backends: text <-> token id tensors, as ensemble steps."""
