# Type stubs of kamera.minivl (the mini-VL's synthetic clips, docs/MINIVL.md).
from typing import Dict, List, Union

import numpy as np
import numpy.typing as npt

decoder_file: str
vision_file: str
max_frames: int

class Frame:
    rgb: npt.NDArray[np.uint8]
    objects: List[Dict[str, Union[str, int]]]

class Question:
    family: str
    kind: str
    tokens: List[int]
    answer: int
    frames: List[int]
    text: str

def stream(index: int = 0, n_frames: int = 24, split: str = "test") -> List[Frame]: ...
def questions(frames: List[Frame]) -> List[Question]: ...
def words() -> List[str]: ...
def word_id(word: str) -> int: ...
