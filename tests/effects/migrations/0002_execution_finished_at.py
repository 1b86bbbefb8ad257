from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("effects", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="execution",
            name="finished_at",
            field=models.DateTimeField(null=True),
        ),
    ]
