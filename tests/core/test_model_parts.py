"""A model loaded in parts, and parts added later (TTSModel.add_parts): the browser's flow worker
loads the flow LM alone and adds voice cloning (the Mimi encoder and the speaker projection) when
the first voice is uploaded; what it clones then is what a model loaded whole clones."""

from __future__ import annotations

import numpy as np
import pytest

from core import TTSModel
from core.export import export
from core.portable.errors import PocketTTSError, VoiceError, WeightsError
from core.portable.network import quantize
from core.portable.voices import state as voice_state
from core.portable.weights import params
from tests.support.paths import TINY_DIR, VOICE_24K

CONFIG = TINY_DIR / "tiny_gqa" / "config.yaml"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, request):
    """An int8 bundle of the tiny model: a weights file per part, as the site serves them."""
    patch = pytest.MonkeyPatch()
    patch.setattr(quantize, "MIN_ELEMENTS", 1024)  # the tiny model's matrices are all small: int8 too
    request.addfinalizer(patch.undo)
    out = tmp_path_factory.mktemp("parts") / "bundle"
    export(str(CONFIG), str(out), [str(VOICE_24K)])
    return out


def same_voice(a: voice_state.VoiceState, b: voice_state.VoiceState) -> None:
    ta, tb = voice_state.to_tensors(a), voice_state.to_tensors(b)
    assert ta.keys() == tb.keys()
    for key in ta:
        assert np.array_equal(ta[key], tb[key]), key


@pytest.mark.parametrize("source", ["bundle", "config"])
def test_voice_cloning_added_later_clones_as_a_model_loaded_whole(bundle, source) -> None:
    path = str(bundle if source == "bundle" else CONFIG)
    whole = TTSModel.load(path)
    flow = TTSModel.load(path, parts=(params.FLOW_LM,))
    assert flow.parts == (params.FLOW_LM,) and not flow.can_clone_voices
    assert "mimi" not in flow.params and "speaker_proj_weight" not in flow.params["flow_lm"]
    with pytest.raises(PocketTTSError, match="without its voice cloning"):
        flow.voice_state(str(VOICE_24K))
    if source == "bundle":  # the flow worker has not downloaded the part: nothing else reads it
        (bundle / "voice_cloning.safetensors").rename(bundle / "held back")
        try:
            with pytest.raises(WeightsError, match="voice_cloning.safetensors"):
                flow.add_parts([params.VOICE_CLONING])
            assert flow.parts == (params.FLOW_LM,) and not flow.can_clone_voices
        finally:
            (bundle / "held back").rename(bundle / "voice_cloning.safetensors")
    flow.add_parts([params.VOICE_CLONING])
    assert flow.parts == (params.FLOW_LM, params.VOICE_CLONING) and flow.can_clone_voices
    same_voice(flow.voice_state(str(VOICE_24K)), whole.voice_state(str(VOICE_24K)))
    # The flow LM's prepared params are the ones it had: adding a part prepares only what it adds.
    assert "modulation" in flow.params["flow_lm"]["flow_net"]
    flow.add_parts(params.PARTS)  # the decoder too, prepared as at load: the same audio as whole
    assert flow.parts == params.PARTS
    voice = whole.voice_state(str(VOICE_24K))
    options = {"temperature": 0.0, "max_frames": 4}
    assert np.array_equal(flow.generate("Parts.", voice, **options), whole.generate("Parts.", voice, **options))


def test_a_bundle_without_voice_cloning_stays_unable_to_clone(tmp_path) -> None:
    out = tmp_path / "bundle"
    export(str(CONFIG), str(out), [str(VOICE_24K)], int8=False, voice_cloning=False)
    flow = TTSModel.load(str(out), parts=(params.FLOW_LM,))
    flow.add_parts([params.VOICE_CLONING])
    assert not flow.can_clone_voices
    with pytest.raises(VoiceError, match="cannot clone voices"):
        flow.voice_state(str(VOICE_24K))


def test_a_model_made_from_tensors_has_no_files_to_add_from(model) -> None:
    model.add_parts(params.PARTS)  # every part already there: nothing to read
    from core.portable.model import TTSModel as Model

    files = model.files
    bare = Model(model.config, {}, model.tokenizer, "bare", "nowhere", parts=())
    assert files is not None and bare.files is None
    with pytest.raises(PocketTTSError, match="not loaded from files"):
        bare.add_parts([params.VOICE_CLONING])
