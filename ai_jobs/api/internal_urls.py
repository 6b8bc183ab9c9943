from django.urls import path

from ai_jobs.api import internal_views as views

app_name = "internal"

urlpatterns = [
    path("jobs/poll", views.PollView.as_view(), name="poll"),
    path("jobs/claim", views.ClaimView.as_view(), name="claim"),
    path("jobs/<str:job_id>/lock", views.LockView.as_view(), name="lock"),
    path("jobs/<str:job_id>/heartbeat", views.HeartbeatView.as_view(), name="heartbeat"),
    path("jobs/<str:job_id>/snapshot", views.SnapshotView.as_view(), name="snapshot"),
    path("jobs/<str:job_id>/credential", views.CredentialView.as_view(), name="credential"),
    path("jobs/<str:job_id>/result", views.ResultView.as_view(), name="result"),
    path("jobs/<str:job_id>/fail", views.FailView.as_view(), name="fail"),
    path("jobs/<str:job_id>/invocation-logs", views.InvocationLogsView.as_view(), name="invocation-logs"),
]
