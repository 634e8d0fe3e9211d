"""The page tests' shared fixtures: ``home``, one RWB_HOME per test module (the tiny index and
candidate pool are built once per module), and ``app``, the workbench started on the tiny
dataset in it (``tests.pages.test_app.start``), its caches cleared after each test, and
``app_through_main``, the same run through app.py as in a browser. A module that starts the app
another way defines its own ``app``."""

from __future__ import annotations

import pytest
import streamlit as st


@pytest.fixture(scope="module")
def home(tmp_path_factory, request):
    return tmp_path_factory.mktemp(f"rwb-home-{request.module.__name__.rsplit('.', 1)[-1]}")


@pytest.fixture
def app(home, monkeypatch):
    from tests.pages.test_app import start

    yield start(home, monkeypatch)
    st.cache_data.clear()
    st.cache_resource.clear()


@pytest.fixture
def app_through_main(home, monkeypatch):
    from tests.pages.test_app import route_through_main, start

    route_through_main(monkeypatch)
    yield start(home, monkeypatch)
    st.cache_data.clear()
    st.cache_resource.clear()
