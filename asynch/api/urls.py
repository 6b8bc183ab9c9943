"""model-asynch's paths, at the root (config.urls includes this under "")."""

from django.urls import URLPattern, URLResolver, path

from asynch.api import views, webhooks

urlpatterns: list[URLPattern | URLResolver] = [
    path("model/createModel", views.ModelCreateView.as_view(), name="asynch-model-create"),
    path("model/updateModel", views.ModelUpdateView.as_view(), name="asynch-model-update"),
    path("model/deleteModel", views.ModelDeleteView.as_view(), name="asynch-model-delete"),
    path("model/getModel", views.ModelGetView.as_view(), name="asynch-model-get"),
    path("model/listModels", views.ModelListView.as_view(), name="asynch-model-list"),
    path("model/stats", views.StatsView.as_view(), name="asynch-model-stats"),
    path("task/createTask", views.TaskCreateView.as_view(), name="asynch-task-create"),
    path("task/getTaskResult", views.TaskResultView.as_view(), name="asynch-task-result"),
    path("task/getTaskBatch", views.TaskBatchView.as_view(), name="asynch-task-batch"),
    path("task/download/<str:token>", views.DownloadView.as_view(), name="asynch-download"),
    path("webhook/createEndpoint", webhooks.EndpointCreateView.as_view(), name="webhook-endpoint-create"),
    path("webhook/listEndpoints", webhooks.EndpointListView.as_view(), name="webhook-endpoint-list"),
    path("webhook/updateEndpoint", webhooks.EndpointUpdateView.as_view(), name="webhook-endpoint-update"),
    path("webhook/deleteEndpoint", webhooks.EndpointDeleteView.as_view(), name="webhook-endpoint-delete"),
    path("webhook/rotateSecret", webhooks.RotateSecretView.as_view(), name="webhook-rotate-secret"),
    path("webhook/listDeliveries", webhooks.DeliveryListView.as_view(), name="webhook-delivery-list"),
    path("webhook/replay", webhooks.ReplayView.as_view(), name="webhook-replay"),
]
