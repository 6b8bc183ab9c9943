"""The caller's devices under /ai/."""

from django.urls import path

from delivery.api import views

app_name = "delivery"

urlpatterns = [
    path("devices", views.DeviceListView.as_view(), name="devices"),
    path("devices/<str:device_id>", views.DeviceDetailView.as_view(), name="device"),
]
