"""The cpsched service and its dispatch core (``service.dispatch``)."""
