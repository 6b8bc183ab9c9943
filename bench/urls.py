"""The product's URLs plus the baselines the benchmarks compare against."""

from django.urls import include, path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.selectors import public_id_of
from ai_jobs.models import AiRuntimeJob


class BareInsertView(APIView):
    """A bare DRF view: the same JWT authentication, one INSERT, a small answer."""

    def post(self, request: Request) -> Response:
        job = AiRuntimeJob.objects.create(
            user=request.user,
            job_type=request.data["jobType"],
            target_type="user",
            target_id=public_id_of(request.user),
        )
        return Response({"jobId": job.id, "status": job.status}, status=201)


urlpatterns = [
    path("bench/bare-insert", BareInsertView.as_view()),
    path("", include("config.urls")),
]
