"""One module per family of planted cause: MECHANISM, plant(scene, rng, strength), optional EXCLUDE (innocents
that would act in its setup), LINK_BASE_VENV, prepare(scene) (after the base is built) and between(scene)
(after GOOD's capture, before BAD's)."""
