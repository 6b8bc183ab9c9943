"""/learning/*, without trailing slashes."""

from django.urls import URLPattern, URLResolver, path

from learning.api import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("knowledge-bases", views.KnowledgeBaseListView.as_view(), name="learning-knowledge-bases"),
    path("knowledge-bases/<str:object_id>", views.KnowledgeBaseDetailView.as_view(), name="learning-knowledge-base"),
    path("materials", views.MaterialListView.as_view(), name="learning-materials"),
    path("materials/<str:object_id>", views.MaterialDetailView.as_view(), name="learning-material"),
    path("knowledge-points", views.KnowledgePointListView.as_view(), name="learning-knowledge-points"),
    path("knowledge-points/<str:object_id>", views.KnowledgePointDetailView.as_view(), name="learning-knowledge-point"),
    path("study-records", views.StudyRecordListView.as_view(), name="learning-study-records"),
    path("study-records/<str:object_id>", views.StudyRecordDetailView.as_view(), name="learning-study-record"),
]
